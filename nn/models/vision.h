// Moved to vision/vision.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/vision.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/vision.h"  // nabla: forwarding header
