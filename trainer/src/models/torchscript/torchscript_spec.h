// The keys of a module the team exported from Python with torch.jit.script or trace
// (model.kind: torchscript; docs/bring-your-own-model.md). With the block protocol (a
// ModuleList attribute and exported methods embed and head) it runs as embed -> blocks -> head
// and a plan may checkpoint its blocks; without it, it runs as one opaque forward. Torch-free:
// the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trainerd {

// The block protocol's names in the module.
struct BlockProtocol {
  std::string blocks = "blocks";
  std::string embed = "embed";
  std::string head = "head";
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BlockProtocol, blocks, embed, head)

struct TorchScriptKeys {
  std::string path;  // the .pt file, absolute after parsing
  BlockProtocol protocol;
  bool protocol_named = false;  // the job names blocks/embed/head: missing ones are an error
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TorchScriptKeys, path, protocol, protocol_named)

}  // namespace trainerd
