// maxcode sandbox launcher: runs one untrusted program under limits and reports how it ended.
//
// Why a compiled helper: Python's preexec_fn forces a full fork of the evaluator process
// (slow with large libraries loaded); this launcher is exec'd through vfork and does the
// namespace, mount, rlimit and uid work in a few hundred microseconds.
//
// Layout when namespaces are on (root):
//   launcher: unshare(mount, net, pid, ipc, uts) -> private mounts: fresh size-capped tmpfs
//             on /tmp (the program's only writable place and its cwd), empty read-only tmpfs
//             over every --hide path (tests, caches, project) -> fork
//   init (pid 1 of the new pid namespace): fresh /proc, fork + time the program, enforce the
//             wall limit, write the status line, exit; the kernel then kills every process
//             left in the namespace (fork bombs, daemons), so nothing outlives a run.
//   program:  stdin from the test input, rlimits, CPU pinning, setsid, dedicated uid, exec.
// Without namespaces (not root) the same steps run minus unshare/mounts/uid, and the
// process group is killed at the end instead.
//
// Long-lived Python processes that import candidate code (the CUDA evaluator's zygote and
// compile jobs) use the same launcher with: --ro-root (every mount read-only, recursively;
// /tmp and /dev/shm private writable tmpfs), --writable DIR (a narrow read-write bind of
// one directory), --keep DIR (a directory, e.g. under /tmp, kept visible read-only),
// --stdin - (keep the caller's stdin: a job pipe), and 0 for --wall-ms, --cpu-s and
// --as-bytes (no limit: the GPU driver maps terabytes of address space).
//
// Status line (to --status-fd): "exit=<code> signal=<sig> timeout=<0|1> wall_ns=<n>
// user_us=<n> sys_us=<n> maxrss_kb=<n> setup_error=<text-or-empty>".
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

struct Opts {
  long uid = -1, gid = -1, cpu = -1;
  long wall_ms = 10000, cpu_s = 10, nproc = 16, status_fd = 3, nofile = 64;
  long long as_bytes = 500LL << 20, fsize_bytes = 16LL << 20, tmpfs_bytes = 64LL << 20;
  bool ns = true, ro_root = false;
  std::string stdin_path = "/dev/null", copy, workdir = "/tmp";  // the private tmpfs
  std::vector<std::string> hide, writable, keep;
  std::vector<char*> argv;
};

static int status_fd = 3;

[[noreturn]] static void fail_setup(const char* what) {
  dprintf(status_fd, "exit=-1 signal=0 timeout=0 wall_ns=0 user_us=0 sys_us=0 maxrss_kb=0 "
                     "setup_error=%s: %s\n", what, strerror(errno));
  _exit(111);
}

static long long now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void set_limit(int res, rlim_t soft, rlim_t hard) {
  rlimit rl{soft, hard};
  if (setrlimit(res, &rl) != 0) fail_setup("setrlimit");
}

static void copy_file(int in, const char* dst) {
  int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0) fail_setup("create program copy");
  char buf[1 << 16];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, n) != n) fail_setup("copy program");
  close(in);
  close(out);
}

// mount_setattr(2) (Linux 5.12+): one call flips a whole mount tree.
struct McMountAttr {
  unsigned long long attr_set, attr_clr, propagation, userns_fd;
};
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
static const unsigned long long kMountAttrRdonly = 0x1;
static const unsigned int kAtRecursive = 0x8000;

// Every mount read-only: mount_setattr on the tree, else a remount per mountinfo line.
static void read_only_root() {
  McMountAttr attr{kMountAttrRdonly, 0, 0, 0};
  if (syscall(SYS_mount_setattr, AT_FDCWD, "/", kAtRecursive, &attr, sizeof attr) == 0) return;
  FILE* f = fopen("/proc/self/mountinfo", "r");
  if (!f) fail_setup("read mountinfo");
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    char point[4096];
    if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1) continue;
    // best effort per mount: one that refuses (e.g. a locked one) stays as it was
    mount(nullptr, point, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr);
  }
  fclose(f);
  if (access("/", W_OK) == 0 && mount(nullptr, "/", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
    fail_setup("remount / read-only");
}

static void mkdir_p(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);  // EEXIST is fine
}

// Paths opened before /tmp is covered (they may lie under it), bound again afterwards:
// --writable read-write, --keep read-only.
struct Carried {
  std::string path;
  int fd;
  bool writable;
};

static void bind_carried(const Carried& c) {
  mkdir_p(c.path);
  std::string src = "/proc/self/fd/" + std::to_string(c.fd);
  // MS_REC: a carried path keeps the mounts beneath it (e.g. a driver under /usr/local/nvidia,
  // mounted on its own, when /usr is carried); a plain bind would hide them.
  if (mount(src.c_str(), c.path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) fail_setup("bind carried path");
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (c.writable ? 0 : MS_RDONLY);
  if (mount(nullptr, c.path.c_str(), nullptr, flags, nullptr) != 0) fail_setup("remount carried path");
  close(c.fd);
}

static void private_mounts(const Opts& o) {
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail_setup("make / private");
  if (o.ro_root) read_only_root();
  std::vector<Carried> carried;
  for (const auto& p : o.writable) carried.push_back({p, open(p.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC), true});
  for (const auto& p : o.keep) carried.push_back({p, open(p.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC), false});
  for (const auto& c : carried)
    if (c.fd < 0) fail_setup(("open carried path " + c.path).c_str());
  for (const auto& p : o.hide) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (mount("hidden", p.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0555") != 0)
      fail_setup("hide path");
  }
  std::string opts = "size=" + std::to_string(o.tmpfs_bytes) + ",mode=0700";
  if (mount("sandbox", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) fail_setup("mount /tmp");
  for (const char* p : {"/var/tmp", "/dev/shm", "/run"}) {
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (o.ro_root && strcmp(p, "/run") == 0) continue;  // read-only already; driver sockets live here
    if (o.ro_root && strcmp(p, "/dev/shm") == 0)  // torch and Python semaphores need it
      mount("sandbox-shm", p, "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str());
    else
      mount("empty", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0555");
  }
  // The dedicated uid must reach carried paths whose ancestors only root may enter (~/.cache
  // under a 0700 /root): an empty tmpfs over the highest such ancestor hides only what that
  // uid could not read anyway.
  std::vector<std::string> covered;
  for (const auto& c : o.uid >= 0 ? carried : std::vector<Carried>{}) {
    for (size_t i = 1; i < c.path.size(); ++i) {
      if (c.path[i] != '/') continue;
      std::string dir = c.path.substr(0, i);
      // The fresh /tmp is the uid's own (chowned below): covering it would leave 64 KiB of room.
      if (dir == "/tmp" || dir == "/dev/shm") continue;
      struct stat st;
      if (stat(dir.c_str(), &st) != 0 || (st.st_mode & S_IXOTH)) continue;
      bool done = false;
      for (const auto& d : covered) done |= dir == d;
      if (!done && mount("cover", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0)
        fail_setup("cover untraversable directory");
      covered.push_back(dir);
      break;
    }
  }
  std::sort(carried.begin(), carried.end(),
            [](const Carried& a, const Carried& b) { return a.path.size() < b.path.size(); });
  for (const auto& c : carried) bind_carried(c);
  if (o.uid >= 0 && chown("/tmp", (uid_t)o.uid, (gid_t)o.gid) != 0) fail_setup("chown /tmp");
  if (o.uid >= 0 && o.ro_root && chown("/dev/shm", (uid_t)o.uid, (gid_t)o.gid) != 0) fail_setup("chown /dev/shm");
}

[[noreturn]] static void exec_program(const Opts& o, int stdin_fd) {
  if (stdin_fd != 0) {
    if (dup2(stdin_fd, 0) < 0) fail_setup("stdin");
    close(stdin_fd);
  }
  setsid();
  if (o.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)o.cpu, &set);
    sched_setaffinity(0, sizeof set, &set);  // best effort: pinning is an accuracy aid
  }
  if (o.cpu_s > 0) set_limit(RLIMIT_CPU, (rlim_t)o.cpu_s, (rlim_t)o.cpu_s + 1);
  if (o.as_bytes > 0) set_limit(RLIMIT_AS, (rlim_t)o.as_bytes, (rlim_t)o.as_bytes);
  set_limit(RLIMIT_FSIZE, (rlim_t)o.fsize_bytes, (rlim_t)o.fsize_bytes);
  set_limit(RLIMIT_CORE, 0, 0);
  set_limit(RLIMIT_NOFILE, (rlim_t)o.nofile, (rlim_t)o.nofile);
  set_limit(RLIMIT_NPROC, (rlim_t)o.nproc, (rlim_t)o.nproc);
  if (o.uid >= 0) {
    if (setgroups(0, nullptr) != 0) fail_setup("setgroups");
    if (setgid((gid_t)o.gid) != 0) fail_setup("setgid");
    if (setuid((uid_t)o.uid) != 0) fail_setup("setuid");
  }
  if (chdir(o.workdir.c_str()) != 0) fail_setup("chdir");
  if (status_fd > 2) fcntl(status_fd, F_SETFD, FD_CLOEXEC);  // open until exec succeeds
  execv(o.argv[0], o.argv.data());
  fail_setup("exec");
}

// Runs in the new pid namespace as pid 1 (or as a plain child without namespaces).
[[noreturn]] static void supervise(const Opts& o, int stdin_fd, int prog_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (o.ns) mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);  // our pids
  if (prog_fd >= 0) copy_file(prog_fd, (o.workdir + "/prog").c_str());
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  long long start = now_ns();
  pid_t pid = fork();
  if (pid < 0) fail_setup("fork");
  if (pid == 0) {
    sigprocmask(SIG_UNBLOCK, &chld, nullptr);
    exec_program(o, stdin_fd);
  }
  if (stdin_fd != 0) close(stdin_fd);
  long long deadline = o.wall_ms > 0 ? start + o.wall_ms * 1000000LL : -1;
  int wstatus = 0, timed_out = 0;
  for (;;) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    long long left = deadline < 0 ? 3600LL * 1000000000LL : deadline - now_ns();
    if (deadline >= 0 && left <= 0) {
      timed_out = 1;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      break;
    }
    timespec ts{(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    sigtimedwait(&chld, nullptr, &ts);
  }
  long long wall = now_ns() - start;
  if (!o.ns) kill(-pid, SIGKILL);  // stragglers in its session; the namespace does this otherwise
  rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
  dprintf(status_fd, "exit=%d signal=%d timeout=%d wall_ns=%lld user_us=%lld sys_us=%lld maxrss_kb=%ld setup_error=\n",
          code, sig, timed_out, wall, (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
          (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec, ru.ru_maxrss);
  _exit(0);
}

static Opts parse(int argc, char** argv) {
  Opts o;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (a == "--no-ns") { o.ns = false; continue; }
    if (a == "--ro-root") { o.ro_root = true; continue; }
    if (i + 1 >= argc) { fprintf(stderr, "mcbox: %s needs a value\n", a.c_str()); exit(2); }
    const char* v = argv[++i];
    if (a == "--uid") o.uid = atol(v);
    else if (a == "--gid") o.gid = atol(v);
    else if (a == "--cpu") o.cpu = atol(v);
    else if (a == "--wall-ms") o.wall_ms = atol(v);
    else if (a == "--cpu-s") o.cpu_s = atol(v);
    else if (a == "--nproc") o.nproc = atol(v);
    else if (a == "--status-fd") o.status_fd = atol(v);
    else if (a == "--as-bytes") o.as_bytes = atoll(v);
    else if (a == "--fsize-bytes") o.fsize_bytes = atoll(v);
    else if (a == "--tmpfs-bytes") o.tmpfs_bytes = atoll(v);
    else if (a == "--stdin") o.stdin_path = v;
    else if (a == "--copy") o.copy = v;
    else if (a == "--workdir") o.workdir = v;
    else if (a == "--hide") o.hide.push_back(v);
    else if (a == "--writable") o.writable.push_back(v);
    else if (a == "--keep") o.keep.push_back(v);
    else if (a == "--nofile") o.nofile = atol(v);
    else { fprintf(stderr, "mcbox: unknown option %s\n", a.c_str()); exit(2); }
  }
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  o.argv.push_back(nullptr);
  if (o.argv.size() < 2) { fprintf(stderr, "mcbox: no program after --\n"); exit(2); }
  return o;
}

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  status_fd = (int)o.status_fd;
  int stdin_fd = o.stdin_path == "-" ? 0 : open(o.stdin_path.c_str(), O_RDONLY);  // before privileges drop
  if (stdin_fd < 0) fail_setup("open stdin");
  int prog_fd = -1;  // opened before /tmp and hidden paths are covered
  if (!o.copy.empty() && (prog_fd = open(o.copy.c_str(), O_RDONLY | O_CLOEXEC)) < 0)
    fail_setup("open program");
  if (o.ns) {
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS) != 0)
      fail_setup("unshare");
    private_mounts(o);
  }
  pid_t init = fork();
  if (init < 0) fail_setup("fork init");
  if (init == 0) supervise(o, stdin_fd, prog_fd);
  if (stdin_fd != 0) close(stdin_fd);
  int st = 0;
  while (waitpid(init, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 112;
}
