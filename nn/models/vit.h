// Moved to vision/vit.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/vit.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/vit.h"  // nabla: forwarding header
