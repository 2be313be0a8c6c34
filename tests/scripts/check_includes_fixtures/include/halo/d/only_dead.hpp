#pragma once
// halo_d does not link halo_c, but no compiled line includes this header.
#include "halo/c/c.hpp"
