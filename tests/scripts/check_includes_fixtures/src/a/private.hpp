#pragma once
// A header beside halo_a's sources belongs to halo_a: the next line fails.
#include "halo/b/b.hpp"
