#include "loop/zip_check.h"

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <vector>

namespace trainerd {
namespace {

constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::uint32_t kCentralHeader = 0x02014b50;
constexpr std::uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;
constexpr std::uint32_t kZip64EndOfCentralDirectory = 0x06064b50;
constexpr std::size_t kEndRecordSize = 22;
constexpr std::size_t kMaxCommentSize = 0xffff;
constexpr std::size_t kChunk = 1 << 20;

// Little-endian fields of a record in memory; `at + width <= bytes.size()` is the caller's.
std::uint64_t Field(const std::vector<char>& bytes, std::size_t at, int width) {
  std::uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) {
    value = value << 8 | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  }
  return value;
}

class Archive {
 public:
  explicit Archive(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (in_) {
      in_.seekg(0, std::ios::end);
      size_ = static_cast<std::uint64_t>(in_.tellg());
    }
  }
  bool is_open() const { return static_cast<bool>(in_); }
  std::uint64_t size() const { return size_; }

  // `count` bytes at `offset`, or false when the file has fewer.
  bool Read(std::uint64_t offset, std::size_t count, std::vector<char>* out) {
    if (offset > size_ || count > size_ - offset) return false;
    out->resize(count);
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(out->data(), static_cast<std::streamsize>(count));
    return static_cast<bool>(in_);
  }

  // CRC-32 of the `size` bytes an entry holds, stored as `count` bytes at `offset` (inflated
  // first when `deflated`); nullopt when the file has fewer bytes or the deflate stream is
  // damaged or does not inflate to exactly `size` bytes.
  std::optional<std::uint32_t> Crc(std::uint64_t offset, std::uint64_t count, bool deflated,
                                   std::uint64_t size) {
    uLong crc = crc32(0, nullptr, 0);
    z_stream z{};
    if (deflated && inflateInit2(&z, -MAX_WBITS) != Z_OK) return std::nullopt;
    std::vector<char> chunk;
    std::vector<unsigned char> out(deflated ? kChunk : 0);
    std::uint64_t produced = 0;
    int status = Z_OK;
    while (count > 0) {
      const std::size_t n = count < kChunk ? static_cast<std::size_t>(count) : kChunk;
      if (!Read(offset, n, &chunk)) break;
      offset += n;
      count -= n;
      if (!deflated) {
        crc = crc32(crc, reinterpret_cast<const Bytef*>(chunk.data()), static_cast<uInt>(n));
        produced += n;
        continue;
      }
      z.next_in = reinterpret_cast<Bytef*>(chunk.data());
      z.avail_in = static_cast<uInt>(n);
      while (z.avail_in > 0 && status == Z_OK) {
        z.next_out = out.data();
        z.avail_out = static_cast<uInt>(out.size());
        status = inflate(&z, Z_NO_FLUSH);
        const std::size_t made = out.size() - z.avail_out;
        crc = crc32(crc, out.data(), static_cast<uInt>(made));
        produced += made;
      }
      if (status != Z_OK && status != Z_STREAM_END) break;
    }
    if (deflated) inflateEnd(&z);
    const bool complete = count == 0 && (!deflated || status == Z_STREAM_END) && produced == size;
    return complete ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(crc)) : std::nullopt;
  }

 private:
  std::string path_;
  std::ifstream in_;
  std::uint64_t size_ = 0;
};

}  // namespace

Status VerifyZipChecksums(const std::string& path) {
  Archive archive(path);
  if (!archive.is_open()) return Status::Corruption(path + ": cannot read checkpoint");
  const auto damaged = [&path](const std::string& what) {
    return Status::Corruption(path + ": damaged checkpoint archive: " + what);
  };
  const std::uint64_t size = archive.size();
  if (size < kEndRecordSize) return damaged("too short for a zip archive");

  // The end of central directory record: the last 22 bytes, or earlier by a comment.
  const std::size_t tail_size = static_cast<std::size_t>(
      size < kEndRecordSize + kMaxCommentSize ? size : kEndRecordSize + kMaxCommentSize);
  std::vector<char> tail;
  if (!archive.Read(size - tail_size, tail_size, &tail)) {
    return Status::Corruption(path + ": cannot read checkpoint");
  }
  std::size_t end = tail_size - kEndRecordSize + 1;
  bool found = false;
  while (end-- > 0) {
    if (Field(tail, end, 4) == kEndOfCentralDirectory &&
        end + kEndRecordSize + Field(tail, end + 20, 2) == tail_size) {
      found = true;
      break;
    }
  }
  if (!found) return damaged("no end of central directory");
  std::uint64_t entries = Field(tail, end + 10, 2);
  std::uint64_t directory_size = Field(tail, end + 12, 4);
  std::uint64_t directory_offset = Field(tail, end + 16, 4);
  const std::uint64_t end_offset = size - tail_size + end;
  if (entries == 0xffff || directory_size == 0xffffffff || directory_offset == 0xffffffff) {
    std::vector<char> record;
    if (end_offset < 20 || !archive.Read(end_offset - 20, 20, &record) ||
        Field(record, 0, 4) != kZip64Locator) {
      return damaged("no zip64 end of central directory locator");
    }
    const std::uint64_t zip64_end = Field(record, 8, 8);
    if (!archive.Read(zip64_end, 56, &record) ||
        Field(record, 0, 4) != kZip64EndOfCentralDirectory) {
      return damaged("no zip64 end of central directory");
    }
    entries = Field(record, 32, 8);
    directory_size = Field(record, 40, 8);
    directory_offset = Field(record, 48, 8);
  }
  if (directory_offset > end_offset || directory_size > end_offset - directory_offset) {
    return damaged("central directory outside the file");
  }
  if (entries == 0 || entries > directory_size / 46) return damaged("bad number of entries");

  std::vector<char> directory;
  if (!archive.Read(directory_offset, static_cast<std::size_t>(directory_size), &directory)) {
    return Status::Corruption(path + ": cannot read checkpoint");
  }
  std::size_t at = 0;
  std::vector<char> local;
  for (std::uint64_t i = 0; i < entries; ++i) {
    if (directory.size() - at < 46 || Field(directory, at, 4) != kCentralHeader) {
      return damaged("bad central directory entry " + std::to_string(i));
    }
    const std::uint64_t method = Field(directory, at + 10, 2);
    const std::uint64_t crc = Field(directory, at + 16, 4);
    std::uint64_t stored_size = Field(directory, at + 20, 4);
    std::uint64_t data_size = Field(directory, at + 24, 4);
    const std::size_t name_size = static_cast<std::size_t>(Field(directory, at + 28, 2));
    const std::size_t extra_size = static_cast<std::size_t>(Field(directory, at + 30, 2));
    const std::size_t comment_size = static_cast<std::size_t>(Field(directory, at + 32, 2));
    std::uint64_t offset = Field(directory, at + 42, 4);
    if (directory.size() - at - 46 < name_size + extra_size + comment_size) {
      return damaged("bad central directory entry " + std::to_string(i));
    }
    const std::string name(directory.data() + at + 46, name_size);
    // Zip64 extended information: the 8-byte values of the fields that read 0xffffffff.
    const std::size_t limit = at + 46 + name_size + extra_size;
    for (std::size_t x = at + 46 + name_size; x + 4 <= limit;) {
      const std::uint64_t id = Field(directory, x, 2);
      const std::size_t length = static_cast<std::size_t>(Field(directory, x + 2, 2));
      if (limit - x - 4 < length) return damaged(name + ": bad extra field");
      if (id == 0x0001) {
        std::size_t v = x + 4;
        for (std::uint64_t* value : {&data_size, &stored_size, &offset}) {
          if (*value != 0xffffffff) continue;
          if (x + 4 + length - v < 8) return damaged(name + ": bad zip64 field");
          *value = Field(directory, v, 8);
          v += 8;
        }
      }
      x += 4 + length;
    }
    // LibTorch stores records and deflates some (the TorchScript code).
    if (method != 0 && method != 8)
      return damaged(name + ": compression method " + std::to_string(method));
    if (method == 0 && stored_size != data_size) return damaged(name + ": sizes differ");
    if (!archive.Read(offset, 30, &local) || Field(local, 0, 4) != kLocalHeader) {
      return damaged(name + ": bad local header");
    }
    const std::uint64_t data = offset + 30 + Field(local, 26, 2) + Field(local, 28, 2);
    if (data > directory_offset || stored_size > directory_offset - data) {
      return damaged(name + ": data outside the file");
    }
    if (archive.Crc(data, stored_size, method == 8, data_size) !=
        std::optional<std::uint32_t>(crc)) {
      return damaged(name + ": CRC-32 does not match the data");
    }
    at += 46 + name_size + extra_size + comment_size;
  }
  return Status::Ok();
}

}  // namespace trainerd
