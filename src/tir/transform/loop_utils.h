/// \file loop_utils.h
/// \brief Small IR utilities shared by the tir passes (internal to src/tir/transform).
#pragma once

#include "kiln/tir/function.h"

namespace kiln::tir {

/// A copy of `s` in which every variable it binds (For loop vars, Let/LetStmt vars, Allocate
/// buffer vars) is replaced by a fresh variable of the same name and type, so that copies of
/// one body can sit side by side without binding one variable twice.
Stmt renew_defs(const Stmt& s);

/// True if `s` is a statement that does nothing (Evaluate of a constant, an empty sequence).
bool is_no_op(const Stmt& s);

/// The statement that does nothing.
Stmt make_no_op();

}  // namespace kiln::tir
