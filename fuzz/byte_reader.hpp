// fuzz/byte_reader.hpp: the fuzz input as the fuzz targets read it, front to back, one byte or
// one big-endian integer at a time; past its end every byte is 0 (so any input is a complete run).
#pragma once

#include <cstddef>
#include <cstdint>

namespace amla_fuzz {

class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool done() const { return pos_ >= size_; }
  std::uint32_t u32() { return static_cast<std::uint32_t>(big_endian(4)); }
  std::int64_t i64() { return static_cast<std::int64_t>(big_endian(8)); }

 private:
  std::uint64_t big_endian(int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | byte();
    return v;
  }

  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace amla_fuzz
