#pragma once
#include <halo/a/a.hpp>
