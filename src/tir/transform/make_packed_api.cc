// make_packed_api: wraps a PrimFunc in the packed calling convention (tir/packed_api.h). The
// new body is a chain built back to front from a list of steps: each step is either a check
// (an Evaluate of kiln.arg_check, which returns -1 from the function with a formatted message
// when its condition is false) or a binding (a LetStmt whose scope is everything after it).
// Checks come in dependency order so that no check reads memory an earlier check has not
// validated: argument count, all type codes, then per tensor ndim, dtype, device, shape,
// strides (read only when the strides pointer is not NULL, via if_then_else) and alignment;
// a tensor whose shape and strides are all constants gets those checks as one
// kiln.array_check statement (one run-time call instead of a dozen inline checks).
// The original body ends the chain inside a compute_scope AttrStmt.
#include <algorithm>
#include <string>
#include <vector>

#include "kiln/ir/op.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/tir/packed_api.h"

namespace kiln::tir {

namespace {

/// One step of the generated prologue.
struct Step {
  Stmt check;  ///< a check, or undefined for a binding
  Var var;     ///< the bound variable
  Expr value;  ///< its value
};

Expr intrin(DataType t, const char* name, std::vector<Expr> args) {
  return Call::make(t, name, std::move(args), CallKind::kIntrinsic);
}

Stmt arg_check(Expr cond, const std::string& prefix, KilnGotKind kind, Expr got) {
  return Evaluate::make(
      intrin(DataType::Int(32), builtin::kArgCheck,
             {std::move(cond), StringImm::make(prefix), IntImm::make(DataType::Int(32), kind),
              cast(DataType::Int(64), std::move(got))}));
}

Expr array_get(const Var& arr, ArrayField field, DataType t, int dim = -1) {
  std::vector<Expr> args{arr, IntImm::make(DataType::Int(32), static_cast<int32_t>(field))};
  if (dim >= 0) args.push_back(IntImm::make(DataType::Int(32), dim));
  return intrin(t, builtin::kArrayGet, std::move(args));
}

/// The type code a scalar of type t is passed with, and its name in messages.
std::pair<int, const char*> scalar_type_code(DataType t) {
  if (t.is_float()) return {kKilnFloat, "float"};
  return {kKilnInt, "int"};
}

/// The buffer's shape then its strides (compact row-major when it has none) as int64
/// constants, or nothing when one of them is not a constant.
std::vector<Expr> constant_shape_and_strides(const Buffer& buf) {
  const size_t ndim = buf->shape.size();
  std::vector<int64_t> shape, strides(ndim);
  for (const Expr& s : buf->shape) {
    auto c = as_const_int(s);
    if (!c) return {};
    shape.push_back(*c);
  }
  int64_t expected = 1;
  for (size_t d = ndim; d-- > 0;) {
    if (buf->strides.empty()) {
      strides[d] = expected;
    } else if (auto c = as_const_int(buf->strides[d])) {
      strides[d] = *c;
    } else {
      return {};
    }
    expected *= shape[d];
  }
  std::vector<Expr> r;
  for (int64_t v : shape) r.push_back(make_const(DataType::Int(64), v));
  for (int64_t v : strides) r.push_back(make_const(DataType::Int(64), v));
  return r;
}

}  // namespace

PrimFunc make_packed_api(PrimFunc f) {
  KILN_USER_CHECK(f.defined()) << "make_packed_api: undefined function";
  if (f.attr("packed_api") == "1") return f;
  const std::string& name = f->name;
  const int n = static_cast<int>(f->params.size());
  Var args("args", DataType::Handle());
  Var type_codes("type_codes", DataType::Handle());
  Var num_args("num_args", DataType::Int(32));

  std::vector<Step> steps;
  auto check = [&](Expr cond, const std::string& prefix, KilnGotKind kind, Expr got) {
    steps.push_back(Step{arg_check(std::move(cond), prefix, kind, std::move(got)), Var(), Expr()});
  };
  auto bind = [&](Var v, Expr value) {
    steps.push_back(Step{Stmt(), std::move(v), std::move(value)});
  };

  check(num_args == n,
        name + ": expected " + std::to_string(n) + (n == 1 ? " argument" : " arguments") + ", got ",
        kKilnGotInt, num_args);

  // Type codes of every argument before any argument is read.
  std::vector<std::string> labels;
  for (int i = 0; i < n; ++i) {
    const Var& p = f->params[i];
    auto it = f->buffer_map.find(p);
    std::string pname = it != f->buffer_map.end() ? it->second->name : p.name();
    labels.push_back(name + ": argument " + std::to_string(i) + " (" + pname + "): ");
    Expr code = intrin(DataType::Int(32), builtin::kArgTypeCode,
                       {type_codes, IntImm::make(DataType::Int(32), i)});
    if (it != f->buffer_map.end()) {
      check(code == kKilnArrayHandle, labels[i] + "type code expected array, got ",
            kKilnGotTypeCode, code);
    } else {
      KILN_USER_CHECK(!p.dtype().is_handle())
          << "make_packed_api: " << name << ": parameter " << i << " (" << p.name()
          << ") is a handle without a buffer in buffer_map";
      KILN_USER_CHECK(p.dtype().is_scalar())
          << "make_packed_api: " << name << ": parameter " << i << " (" << p.name()
          << ") has vector type " << p.dtype();
      auto [tc, tname] = scalar_type_code(p.dtype());
      Expr ok = code == tc;
      if (p.dtype().is_uint() || p.dtype().is_bool()) ok = ok || code == kKilnUInt;
      check(ok, labels[i] + "type code expected " + tname + ", got ", kKilnGotTypeCode, code);
    }
  }

  // Where the tensors live: attr device_type (a KilnDeviceType, set for GPU host functions).
  const int device_type =
      f.attr("device_type").empty() ? kKilnCPU : std::stoi(f.attr("device_type"));
  const std::string device_name = device_type == kKilnCPU    ? "cpu"
                                  : device_type == kKilnCUDA ? "cuda"
                                                             : std::to_string(device_type);
  VarSet bound_shape_vars;
  std::vector<Step> data_binds;
  for (int i = 0; i < n; ++i) {
    const Var& p = f->params[i];
    auto it = f->buffer_map.find(p);
    Expr arg_i = IntImm::make(DataType::Int(32), i);
    if (it == f->buffer_map.end()) {
      DataType t = p.dtype();
      DataType packed = t.is_float() ? DataType::Float(64) : DataType::Int(64);
      Expr v = intrin(packed, builtin::kArgValue, {args, arg_i});
      bind(p, t.is_bool() ? Expr(v != make_zero(packed)) : cast(t, v));
      continue;
    }
    const Buffer& buf = it->second;
    const std::string& label = labels[i];
    Var arr(buf->name + "_handle", DataType::Handle());
    bind(arr, intrin(DataType::Handle(), builtin::kArgValue, {args, arg_i}));
    const int ndim = static_cast<int>(buf->shape.size());
    Expr data = array_get(arr, ArrayField::kData, DataType::Handle());
    if (std::vector<Expr> expect = constant_shape_and_strides(buf); !expect.empty()) {
      // Every check of this tensor in one run-time call (kiln_check_array): the same checks
      // and messages as below, in a fraction of the code.
      std::vector<Expr> a{
          arr, StringImm::make(label), IntImm::make(DataType::Int(32), ndim),
          IntImm::make(DataType::Int(32), static_cast<int32_t>(dtype_word(buf->dtype))),
          make_const(DataType::Int(64), int64_t{std::max(1, buf->data_alignment)})};
      a.insert(a.end(), expect.begin(), expect.end());
      steps.push_back(
          Step{Evaluate::make(intrin(DataType::Int(32), builtin::kArrayCheck, std::move(a))), Var(),
               Expr()});
      data_binds.push_back(Step{Stmt(), buf->data, data});
      continue;
    }
    Expr got_ndim = array_get(arr, ArrayField::kNDim, DataType::Int(32));
    check(got_ndim == ndim, label + "ndim expected " + std::to_string(ndim) + ", got ", kKilnGotInt,
          got_ndim);
    Expr word = array_get(arr, ArrayField::kDTypeWord, DataType::Int(32));
    check(word == static_cast<int32_t>(dtype_word(buf->dtype)),
          label + "dtype expected " + buf->dtype.str() + ", got ", kKilnGotDType, word);
    Expr dev = array_get(arr, ArrayField::kDeviceType, DataType::Int(32));
    check(dev == device_type, label + "device expected " + device_name + ", got ", kKilnGotDevice,
          dev);
    for (int d = 0; d < ndim; ++d) {
      Expr got = array_get(arr, ArrayField::kShape, DataType::Int(64), d);
      const Expr& s = buf->shape[d];
      std::string what = label + "shape[" + std::to_string(d) + "] expected ";
      if (auto c = as_const_int(s)) {
        check(got == make_const(DataType::Int(64), *c), what + std::to_string(*c) + ", got ",
              kKilnGotInt, got);
      } else if (const Variable* v = s.as<Variable>()) {
        Var sv(v);
        if (bound_shape_vars.insert(sv).second) {
          bind(sv, cast(sv.dtype(), got));
        } else {
          check(got == cast(DataType::Int(64), sv), what + v->name + ", got ", kKilnGotInt, got);
        }
      } else {
        KILN_ERROR << "make_packed_api: " << name << ": buffer " << buf->name << " dimension " << d
                   << " has a shape that is neither a constant nor a variable";
      }
    }
    // Strides: NULL (compact) or equal to the buffer's strides (compact row-major if none).
    Expr is_null = array_get(arr, ArrayField::kStridesIsNull, DataType::Bool());
    Expr expected = make_const(DataType::Int(64), int64_t{1});
    std::vector<Expr> strides(ndim);
    for (int d = ndim - 1; d >= 0; --d) {
      strides[d] = buf->strides.empty() ? expected : cast(DataType::Int(64), buf->strides[d]);
      expected = expected * cast(DataType::Int(64), buf->shape[d]);
    }
    for (int d = 0; d < ndim; ++d) {
      Expr got = array_get(arr, ArrayField::kStrides, DataType::Int(64), d);
      auto c = as_const_int(strides[d]);
      if (!c) continue;  // symbolic strides are not checked
      check(if_then_else(is_null, const_true(), got == strides[d]),
            label + "strides[" + std::to_string(d) + "] expected " + std::to_string(*c) + ", got ",
            kKilnGotInt, got);
    }
    if (buf->data_alignment > 1) {
      Expr addr = cast(DataType::Int(64), data);
      check(floormod(addr, make_const(DataType::Int(64), int64_t{buf->data_alignment})) == 0,
            label + "data pointer expected " + std::to_string(buf->data_alignment) +
                "-byte aligned, got ",
            kKilnGotAddress, addr);
    }
    data_binds.push_back(Step{Stmt(), buf->data, data});
  }
  steps.insert(steps.end(), data_binds.begin(), data_binds.end());

  Stmt body = AttrStmt::make(Ref<Object>(), attr::kComputeScope,
                             StringImm::make(name + "_compute_"), f->body);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->check.defined()) {
      body = SeqStmt::make({it->check, body});
    } else {
      body = LetStmt::make(it->var, it->value, body);
    }
  }
  auto attrs = f->attrs;
  attrs["packed_api"] = "1";
  return PrimFunc::make(name, {args, type_codes, num_args}, {}, body, std::move(attrs));
}

}  // namespace kiln::tir
