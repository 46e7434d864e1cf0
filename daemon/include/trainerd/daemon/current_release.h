// releases/current: the stable path of the current release, a symbolic link to its folder
// (releases/run-<id>-<sha12>/, holding model.pt, model.safetensors and model.json), switched
// atomically whenever the store's current release changes (a release, a model rollback).
// The store stays the record; the link follows it.
#pragma once

#include <optional>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

// Points `state_dir`/releases/current at the store's current release: the folder of its
// artifact_path (its model.pt), or the file itself for a release made before releases had
// folders (releases/run-<id>-<sha>.pt), by name relative to releases/ (a state directory
// moved elsewhere links to its own folders); removes the link when no release is current. Called
// after every switch of the store's current release and at every start-up, so a switch
// killed between the record and the link (or a link that failed) is repaired: the serving
// side never keeps loading a withdrawn model across a restart.
Status SyncCurrentReleaseLink(store::Store& store, FileStore& files, const std::string& state_dir);

// The weights (model.safetensors) of the release folder releases/current points to, by its
// real path (a later switch of the link leaves it alone), for init_from: current_release;
// none without a current release or for one published without weights.
std::optional<std::string> CurrentReleaseWeights(const std::string& state_dir);

}  // namespace trainerd::daemon
