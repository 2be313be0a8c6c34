#include "halo/b/b.hpp"
#include "halo/a/detail/inside.hpp"
