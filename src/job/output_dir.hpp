// The job's output directory on rank 0 (halo-infer --out): created if missing, locked for the job,
// refused while it holds another job's result unless --overwrite (which removes that result
// first), and removed again when the job fails before writing anything into it.
#pragma once

#include <filesystem>
#include <string>

namespace halo::job {

class OutputDir {
public:
    /// Creates `dir` if missing and takes <dir>/.halo-infer.lock (flock: released by the kernel
    /// however the process ends). A directory holding a manifest, result pieces or their
    /// temporary files is another job's result: an InputError unless `overwrite`, which removes
    /// the manifest first (the directory then never reads as a result) and then the pieces.
    OutputDir(const std::filesystem::path& dir, bool overwrite);
    ~OutputDir();
    OutputDir(const OutputDir&) = delete;
    OutputDir& operator=(const OutputDir&) = delete;

    /// The job ended: removes the lock file, and the directory itself when this job created it
    /// and it is empty (a failure before any piece was written). Never throws.
    void release() noexcept;

private:
    std::filesystem::path dir_;
    std::filesystem::path lock_path_;
    bool created_ = false;
    int fd_ = -1;
};

/// The paths an interrupted job removes from its signal handler (async-signal-safe: unlink and
/// rmdir of paths copied here beforehand); cleared by release().
void set_signal_cleanup(const std::filesystem::path& lock,
                        const std::filesystem::path& created_dir);
void signal_cleanup() noexcept;

/// Another rank (`failed_rank`) announced its failure (halo/mpi/failure_watch.hpp): a SIGTERM or
/// SIGINT from now on ends this process with status 1 and no line (termination.cpp), after the
/// --out clean-up of rank 0. Async-signal-safe.
void note_peer_failure(int failed_rank) noexcept;

}  // namespace halo::job
