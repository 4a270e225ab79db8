// PrimFunc construction and printing.
#include "kiln/tir/function.h"

#include <sstream>

#include "kiln/ir/printer.h"

namespace kiln::tir {

PrimFunc PrimFunc::make(std::string name, std::vector<Var> params, VarMap<Buffer> buffer_map,
                        Stmt body, std::map<std::string, std::string> attrs) {
  auto* n = new PrimFuncNode();
  n->name = std::move(name);
  n->params = std::move(params);
  n->buffer_map = std::move(buffer_map);
  n->body = std::move(body);
  n->attrs = std::move(attrs);
  return PrimFunc(n);
}

PrimFunc PrimFunc::with_body(Stmt body) const {
  return make(get()->name, get()->params, get()->buffer_map, std::move(body), get()->attrs);
}

PrimFunc PrimFunc::with_attr(const std::string& key, const std::string& value) const {
  auto attrs = get()->attrs;
  attrs[key] = value;
  return make(get()->name, get()->params, get()->buffer_map, get()->body, std::move(attrs));
}

std::string PrimFunc::attr(const std::string& key, const std::string& dflt) const {
  auto it = get()->attrs.find(key);
  return it == get()->attrs.end() ? dflt : it->second;
}

std::string to_string(const PrimFunc& f) {
  std::ostringstream os;
  os << "func " << f->name << "(";
  for (size_t i = 0; i < f->params.size(); ++i) {
    const Var& p = f->params[i];
    if (i) os << ", ";
    auto it = f->buffer_map.find(p);
    if (it != f->buffer_map.end()) {
      const Buffer& b = it->second;
      os << b->name << ": " << b->dtype << "[";
      for (size_t d = 0; d < b->shape.size(); ++d) os << (d ? ", " : "") << b->shape[d];
      os << "]";
    } else {
      os << p.name() << ": " << p.dtype();
    }
  }
  os << ") {\n";
  std::istringstream body(ir::to_string(f->body));
  for (std::string line; std::getline(body, line);) os << "  " << line << "\n";
  os << "}\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const PrimFunc& f) { return os << to_string(f); }

}  // namespace kiln::tir
