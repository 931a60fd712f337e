// Moved to vision/swin.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/swin.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/swin.h"  // nabla: forwarding header
