#pragma once
// The Cholesky factorizations (cholesky, cho_factor, cholesky_checked) as jit's passes see them.
#include "../core/graph.hpp"

namespace vt {

bool is_cholesky_factorization(const OpDef& op);
// A factorization's attributes: with `lower_only`, the backend may leave the factor's strict upper
// triangle unwritten (Backend::cholesky), for a plan in which every reader reads only the lower one.
Attrs factor_attrs(bool lower_only);
bool factor_lower_only(const Attrs& attrs);
// The ops that jit's passes recognise by identity.
extern const OpDef cho_solve_op, cholesky_inverse_op;

}  // namespace vt
