/// \file printer.h
/// \brief The stable, readable text form of the IR (Python-like, one statement a line).
///
/// Variables print by name; two distinct variables that share a name in one printed unit are
/// told apart with a suffix (`i`, `i_1`). The format is golden-tested: change it only together
/// with the golden files (KILN_UPDATE_GOLDEN=1).
#pragma once

#include <ostream>
#include <string>

#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::ostream& operator<<(std::ostream& os, const Expr& e);
std::ostream& operator<<(std::ostream& os, const Stmt& s);

}  // namespace kiln::ir
