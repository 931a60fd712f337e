// Moved to vision/layers.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/layers.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/layers.h"  // nabla: forwarding header
