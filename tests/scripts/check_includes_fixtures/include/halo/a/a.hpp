#pragma once
#include "halo/a/detail/inside.hpp"
