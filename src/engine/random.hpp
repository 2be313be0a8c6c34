// Counter-based random numbers of the engine (seeded weights and features): the shared
// host/device definitions in halo/detail/counter_random.hpp.
#pragma once

#include "halo/detail/counter_random.hpp"
