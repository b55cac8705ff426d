// The MPI world of a run: initialisation, rank facts, and the few collectives
// crossbench needs. Every MPI call is checked (CB_CHECK_MPI).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace crossbench {

class MpiSession {
 public:
  MpiSession();  // MPI_Init_thread; from then on MPI errors return instead of aborting
  ~MpiSession();                        // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the ranks of this node
  MPI_Comm world() const { return MPI_COMM_WORLD; }
  // A duplicate of the world from which data-parallel groups are made
  // (MPI_Comm_create_group talks on its parent with the group's tag: on the
  // world it would meet rank 0's result channel, which probes every tag).
  MPI_Comm groups() const { return groups_; }

  // Every rank's `mine`, in rank order, on every rank.
  std::vector<std::string> allgather(const std::string& mine) const;
  // Rank 0's `text` on every rank.
  std::string broadcast_from_root(const std::string& text) const;
  void barrier() const;
  // Ends the whole job with a message on stderr: for errors that leave the
  // world unable to finish (never a hang).
  [[noreturn]] void abort(const std::string& message, int code = 1) const;
  std::string library_version() const;

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  MPI_Comm groups_ = MPI_COMM_NULL;
};

}  // namespace crossbench
