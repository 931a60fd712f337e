// Moved to io/torch_pickle.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include io/torch_pickle.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../io/torch_pickle.h"  // nabla: forwarding header
