#pragma once
#include "halo/b/b.hpp"
