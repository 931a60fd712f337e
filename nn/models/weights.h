// Moved to vision/weights.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/weights.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/weights.h"  // nabla: forwarding header
