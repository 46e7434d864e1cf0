#include "data/tokens/documents.h"

#include <algorithm>

namespace trainerd {

TokenDocuments TokenDocuments::Find(std::int64_t ids, std::int64_t end_id,
                                    const std::function<std::int64_t(std::int64_t)>& id) {
  TokenDocuments documents;
  for (std::int64_t p = 0; p < ids; ++p) {
    if (id(p) != end_id) continue;
    documents.ends_.push_back(p + 1);
    documents.ended_ = true;
  }
  if (documents.ends_.empty() || documents.ends_.back() != ids) documents.ends_.push_back(ids);
  return documents;
}

DocumentProfile TokenDocuments::Profile() const {
  std::vector<std::int64_t> lengths;
  lengths.reserve(ends_.size());
  std::int64_t start = 0;
  for (const std::int64_t end : ends_) {
    lengths.push_back(end - start);
    start = end;
  }
  DocumentProfile profile;
  profile.count = count();
  const auto middle = lengths.begin() + static_cast<std::ptrdiff_t>(lengths.size() / 2);
  std::nth_element(lengths.begin(), middle, lengths.end());
  profile.median_length = *middle;
  profile.longest = *std::max_element(lengths.begin(), lengths.end());
  return profile;
}

std::vector<DocumentPiece> TokenDocuments::Pieces(
    int window, const std::function<bool(std::int64_t)>& learned) const {
  std::vector<DocumentPiece> pieces;
  std::int64_t start = 0;
  for (const std::int64_t end : ends_) {
    for (std::int64_t first = start; first + 1 < end; first += window) {
      const DocumentPiece piece{first, std::min<std::int64_t>(window + 1, end - first)};
      bool learns = false;
      for (std::int64_t p = first + 1; p < first + piece.length && !learns; ++p)
        learns = learned(p);
      if (learns) pieces.push_back(piece);
    }
    start = end;
  }
  return pieces;
}

double PaddingShare(const std::vector<DocumentPiece>& pieces, int window) {
  if (pieces.empty()) return 0;
  std::int64_t inputs = 0;
  for (const DocumentPiece& piece : pieces) inputs += piece.length - 1;
  const double positions = static_cast<double>(pieces.size()) * window;
  return 1.0 - static_cast<double>(inputs) / positions;
}

}  // namespace trainerd
