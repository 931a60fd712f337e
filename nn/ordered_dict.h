// Moved to core/ordered_dict.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include core/ordered_dict.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../core/ordered_dict.h"  // nabla: forwarding header
