// The schedule-level build: lower a te schedule, then compile the function.
#include "kiln/target/build.h"

namespace kiln {

runtime::Module build(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                      const Target& target, const std::string& name, const tir::LowerOptions& opt) {
  KILN_USER_CHECK(!opt.nests_only)
      << "build " << name << ": nests_only lowering cannot be compiled";
  return build({tir::lower(sch, args, name, opt)}, target);
}

}  // namespace kiln
