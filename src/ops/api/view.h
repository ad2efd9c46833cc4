#pragma once

#include "ops/op_list.h"

namespace strata {}  // namespace strata
