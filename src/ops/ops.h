// The C++ op API: strata::add(a, b), strata::matmul(a, b), ... Each function
// dispatches through the op declared in decl/*.def. One header per family.
#pragma once

#include "ops/op_list.h"

#include "ops/api/core.h"
#include "ops/api/pointwise.h"
#include "ops/api/view.h"
#include "ops/api/shape.h"
#include "ops/api/reduction.h"
#include "ops/api/creation.h"
#include "ops/api/linalg.h"
#include "ops/api/nn.h"
#include "ops/api/activation_backward.h"
