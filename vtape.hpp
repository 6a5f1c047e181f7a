#pragma once
// vtape: one include for the whole public API.
#include "autodiff/grad.hpp"
#include "core/graph.hpp"
#include "core/npy.hpp"
#include "core/tensor.hpp"
#include "ops/elementwise.hpp"
#include "ops/indexing.hpp"
#include "ops/layout.hpp"
#include "ops/linalg.hpp"
#include "ops/matmul.hpp"
#include "ops/reduce.hpp"
