// Moved to vision/efficientnet.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/efficientnet.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/efficientnet.h"  // nabla: forwarding header
