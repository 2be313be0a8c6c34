#include "halo/c/c.hpp"
// halo_a through halo_b: transitive, passes.
#include "halo/a/a.hpp"
// No library owns halo/x/: fails.
#include "halo/x/x.hpp"
// Not under halo/<library>/: fails.
#include "halo/flat.hpp"
