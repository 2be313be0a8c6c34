#include "halo/a/a.hpp"
#include "private.hpp"
#include <vector>
