#include "halo/a/a.hpp"
#include "private.hpp"
#include <vector>
#ifdef HALO_HAVE_A
// Live (halo_a compiles with HALO_HAVE_A): fails.
#include "halo/c/c.hpp"
#else
// Dead: passes.
#include "halo/d/d.hpp"
#endif
#if !defined(HALO_HAVE_A)
// Dead, so the header is reached from nowhere and not checked either.
#include "halo/d/only_dead.hpp"
#endif
