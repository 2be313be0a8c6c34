#include "halo/d/d.hpp"
  #  include <halo/b/b.hpp>
