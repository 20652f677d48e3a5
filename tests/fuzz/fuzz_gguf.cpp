// libFuzzer target: attnviz::GgufFile::fromBytes on arbitrary bytes. Any input must either open,
// with every tensor's bytes inside the data section, whole blocks of its type and disjoint from
// the others, then dequantize (when attnviz reads its type; bounded in size) and give a dotRow per
// row; or be refused with InputError. Nothing else (no crash, no other exception, no sanitizer
// report). The typed getters run on every key: they return or throw InputError.
#include "attnviz/engine/tensor.h"
#include "attnviz/engine/ggml_kernels.h"
#include "attnviz/formats/gguf.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void touchMetadata(const attnviz::GgufFile& f) {
  for (const auto& kv : f.metadata()) {
    const std::string& key = kv.first;
    if (f.find(key) != &kv.second) std::abort();
    const auto guard = [](auto&& fn) {
      try {
        fn();
      } catch (const attnviz::InputError&) {
      }
    };
    guard([&] { f.getString(key); });
    guard([&] { f.getInt(key); });
    guard([&] { f.getFloat(key); });
    guard([&] { f.getBool(key); });
    guard([&] { f.getStringArray(key); });
    guard([&] { f.getFloatArray(key); });
    guard([&] { f.getIntArray(key); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attnviz;
  try {
    const auto f = GgufFile::fromBytes(data, size, "fuzz.gguf");
    if (f->version() != 2 && f->version() != 3) std::abort();
    if (f->alignment() == 0 || (f->alignment() & (f->alignment() - 1)) != 0) std::abort();
    touchMetadata(*f);
    for (const GgufTensor& t : f->tensors()) {
      if (f->findTensor(t.name) != &t) std::abort();
      if (t.ne.empty() || t.ne.size() > 4) std::abort();
      if (t.offset % f->alignment() != 0) std::abort();
      if (f->dataOffset() + t.offset + t.bytes > size) std::abort();
      int bv = 0, bb = 0;
      if (!ggmlTypeLayout(t.type, bv, bb)) std::abort();
      if (t.ne[0] % bv != 0 || t.bytes != std::size_t(t.count() / bv) * std::size_t(bb))
        std::abort();
      if (t.rowBytes() * std::size_t(t.rows()) != t.bytes) std::abort();
      if (!ggmlTypeInfo(t.type, bv, bb)) {
        try {
          f->dequantize(t);
          std::abort();  // an unreadable type must be refused
        } catch (const InputError&) {
        }
        continue;
      }
      if (t.count() > (1 << 16)) continue;
      const std::vector<float> v = f->dequantize(t);
      if (v.size() != std::size_t(t.count())) std::abort();
      if (t.count() == 0) continue;  // (ne[0] may still be huge)
      const std::vector<float> x(std::size_t(t.ne[0]), 1.0f);
      for (std::int64_t r = 0; r < t.rows(); ++r) {
        (void)dotRow(GgmlType(t.type), t.rowData(r), x.data(), t.ne[0]);
      }
    }
    for (std::size_t i = 0; i < f->tensors().size(); ++i)  // disjoint byte spans
      for (std::size_t j = i + 1; j < f->tensors().size(); ++j) {
        const GgufTensor& a = f->tensors()[i];
        const GgufTensor& b = f->tensors()[j];
        if (a.bytes && b.bytes && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes) {
          std::abort();
        }
      }
  } catch (const InputError&) {
  }
  return 0;
}
