// What a backend says about its device, beside the ops: which kind of device it is. Plain data, so that
// the layers above decide by it instead of testing backend names or build flags.
#pragma once

namespace gpt {

// The kinds of device a backend runs on. Code above the backend asks kind(), never the name.
enum class DeviceKind { cpu, cuda };
const char* device_kind_name(DeviceKind kind);  // "cpu" | "cuda"

}  // namespace gpt
