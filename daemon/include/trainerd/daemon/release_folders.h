// The release folders under releases/ (and releases/rejected/): each filled in a staging
// folder beside it, then put in place whole and only then recorded, so a failure or a kill
// midway leaves no partial folder under a release's name; what a kill leaves anyway (a
// staging folder, a folder put in place but never recorded) is collected at start-up.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/daemon/file_store.h"
#include "trainerd/store/store.h"

namespace trainerd::daemon {

// A release's files: its run-<id>-<sha12> folder, or the artifact itself for a release made
// before releases had folders (releases/run-<id>-<sha>.pt, releases/rejected/run-...pt).
std::string ReleaseFilesPath(const store::Release& release);

// Where a file the worker wrote beside the model's weights (`weights`) goes in the release
// folder: its path relative to the weights' folder when it lies below it (an adapter job's
// adapter/ folder), else its file name alone; paths are normalised first ("adapter/../../x"
// lies outside). "" for a path with no file name.
std::string CompanionName(const std::string& weights, const std::string& companion);

// Fills `folder` (a release folder, absent or an unrecorded orphan) through `fill`, which
// writes into the staging folder it is given (each file fsynced, as FileStore's writes do),
// then puts the staging folder in place (FileStore::PlaceFolder). On failure nothing is
// left under `folder`'s name nor in staging.
Status StageReleaseFolder(FileStore& files, const std::string& folder,
                          const std::function<Status(const std::string& staging)>& fill);

// Removes from releases/ and releases/rejected/ of `state_dir` every staging folder and every
// run-* folder or file no release of `store` names (a publish killed before it was recorded),
// matched by name so that a state directory moved or copied elsewhere keeps its releases:
// what start-up repairs. Returns the paths removed.
Result<std::vector<std::string>> CollectReleaseOrphans(store::Store& store, FileStore& files,
                                                       const std::string& state_dir);

}  // namespace trainerd::daemon
