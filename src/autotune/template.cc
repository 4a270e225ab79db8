// Schedule templates: running a template function in define mode yields its space; running it
// with a copy of an apply or fallback config yields a schedule, whose instance carries the
// config after the run (for fallback mode, the point the defaults chose).
#include "kiln/autotune/template.h"

#include "kiln/support/error.h"

namespace kiln::autotune {

ConfigSpace define_space(const TemplateFn& fn) {
  KILN_USER_CHECK(static_cast<bool>(fn)) << "define_space: the template function is empty";
  Config cfg = Config::define();
  fn(cfg);
  return cfg.space();
}

ConfigSpace define_space(const Template& t) {
  KILN_USER_CHECK(static_cast<bool>(t.fn))
      << "define_space: template '" << t.name << "' has no function";
  return define_space(t.fn);
}

Instance instantiate(const TemplateFn& fn, const Config& cfg) {
  KILN_USER_CHECK(static_cast<bool>(fn)) << "instantiate: the template function is empty";
  KILN_USER_CHECK(!cfg.is_define())
      << "instantiate: the config is in define mode; use define_space to get the space";
  Config c = cfg;
  Instance inst = fn(c);
  inst.config = std::move(c);
  return inst;
}

Instance instantiate(const Template& t, const Config& cfg) {
  KILN_USER_CHECK(static_cast<bool>(t.fn))
      << "instantiate: template '" << t.name << "' has no function";
  return instantiate(t.fn, cfg);
}

}  // namespace kiln::autotune
