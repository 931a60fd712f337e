// Moved to vision/convnext.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/convnext.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/convnext.h"  // nabla: forwarding header
