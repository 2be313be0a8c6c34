#pragma once
// halo_d links nothing: the next line fails.
#include "halo/c/c.hpp"
