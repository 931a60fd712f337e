// Moved to io/zip.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include io/zip.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../io/zip.h"  // nabla: forwarding header
