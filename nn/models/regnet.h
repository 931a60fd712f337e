// Moved to vision/regnet.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/regnet.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/regnet.h"  // nabla: forwarding header
