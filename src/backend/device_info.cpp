// See device_info.h: the names of the device kinds.
#include "src/backend/device_info.h"

namespace gpt {

const char* device_kind_name(DeviceKind kind) { return kind == DeviceKind::cuda ? "cuda" : "cpu"; }

}  // namespace gpt
