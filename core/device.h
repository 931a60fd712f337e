// Where a tensor's memory lives: Device{DeviceType::cpu} or Device{DeviceType::cuda, index}.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace nabla {

enum class DeviceType : uint8_t { cpu = 0, cuda = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::cpu;
  int16_t index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int16_t i = 0) : type(t), index(i) {}
  // Parses "cpu", "cuda", "cuda:1"; throws ValueError otherwise.
  explicit Device(const std::string& spec);

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int16_t i = 0) { return {DeviceType::cuda, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;  // "cpu", "cuda:0"

  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

inline constexpr Device kCPU = Device::cpu();
inline constexpr Device kCUDA = Device::cuda(0);

inline std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

namespace cuda {
// True when nabla was built with the CUDA backend, a driver answers and at least one GPU is
// present, and NABLA_DISABLE_CUDA is not set to 1. Never throws: no driver simply means false.
bool is_available();
// Number of usable GPUs (0 under the same conditions that make is_available() false).
int device_count();
}  // namespace cuda

}  // namespace nabla
