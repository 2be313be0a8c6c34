#include "halo/c/c.hpp"
#include "halo/a/a.hpp"
// A detail/ header from an app: fails.
#include "halo/a/detail/inside.hpp"
int main() { return 0; }
