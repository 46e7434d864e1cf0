// data.document_end of token data: an id file as documents, each ending at the end id (its
// EOS; the file's last document may end without it). Packed (data.packing: true, the default),
// a window holds whole or split documents and the batch says where each input stands in its
// own (semantics/document_positions.h); unpacked, each window is one piece of one document,
// padded after it. Either way a target that begins a document is not learned: the id before
// it ends another document.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainerd/trainer/spec/data_profile.h"

namespace trainerd {

// Ids [start, start + length) of an id file.
struct DocumentPiece {
  std::int64_t start = 0;
  std::int64_t length = 0;
};

class TokenDocuments {
 public:
  // One pass over an id file of `ids` ids, id p read by `id(p)`.
  static TokenDocuments Find(std::int64_t ids, std::int64_t end_id,
                             const std::function<std::int64_t(std::int64_t)>& id);

  std::int64_t count() const { return static_cast<std::int64_t>(ends_.size()); }
  // Whether the end id occurs at all (without it the file is one document: a wrong id).
  bool ended() const { return ended_; }
  // Their count and lengths; padding_share left 0.
  DocumentProfile Profile() const;
  // Unpacked windows of `window` + 1 ids: each document from its start, a longer one in pieces
  // every `window` ids (each piece's first id the last target of the one before), keeping those
  // with a target learned where `learned(p)`.
  std::vector<DocumentPiece> Pieces(int window,
                                    const std::function<bool(std::int64_t)>& learned) const;

 private:
  std::vector<std::int64_t> ends_;  // one past each document's last id
  bool ended_ = false;
};

// The share of the input positions of windows of `window` inputs that `pieces` leave as
// padding.
double PaddingShare(const std::vector<DocumentPiece>& pieces, int window);

}  // namespace trainerd
