// Moved to io/file.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include io/file.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../io/file.h"  // nabla: forwarding header
