#ifndef HAUL_TORRENT_H
#define HAUL_TORRENT_H

// A C face for libtorrent-rasterbar (C++): one session, torrents keyed by numbers the caller picks, status read on
// demand and alerts turned into plain events. libtorrent's threads stay its own: it writes one byte to `wake_fd`
// when alerts wait, and the caller pops them on its own thread. Strings and buffers it hands out are freed with
// haul_torrent_free. Every function may be called from one thread at a time only (the caller's loop).

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct haul_torrent_session haul_torrent_session;

typedef struct {
    const char *_Nullable listen_interfaces;  // "127.0.0.1:6881,[::1]:6881"; port 0 picks one
    const char *_Nullable outgoing_interface;
    const char *_Nullable user_agent;
    int dht, lsd, upnp, natpmp;
    int encryption;  // 0 prefer, 1 require, 2 refuse
    int64_t upload_limit, download_limit;  // bytes per second, 0 unlimited
    int max_connections;
    // A proxy for trackers, web seeds and peers: 0 none, 1 SOCKS5, 2 HTTP.
    int proxy_type;
    const char *_Nullable proxy_host;
    int proxy_port;
    const char *_Nullable proxy_user;
    const char *_Nullable proxy_password;
    // Peers' and trackers' addresses refused: "a.b.c.d-e.f.g.h" ranges, one per line (IPv4 and IPv6); a line
    // "+first-last" allows a range again (an exception).
    const char *_Nullable blocked_ranges;
} haul_torrent_settings;

haul_torrent_session *_Nullable haul_torrent_session_new(
    const haul_torrent_settings *_Nonnull settings, int wake_fd, char *_Nullable *_Nonnull error);
void haul_torrent_session_apply(haul_torrent_session *_Nonnull session, const haul_torrent_settings *_Nonnull settings);
// Stops every torrent and the session's threads; no byte is written to the wake descriptor after it returns.
void haul_torrent_session_free(haul_torrent_session *_Nullable session);
// The port the session listens on (0 before it does).
int haul_torrent_listen_port(haul_torrent_session *_Nonnull session);

void haul_torrent_free(void *_Nullable pointer);

// What a .torrent file (or the info dictionary in resume data) holds. Paths are the raw elements joined with '/',
// as the file says them (before libtorrent makes them safe), so the caller can refuse hostile ones.
typedef struct {
    char info_hash[65];  // v1 hex (40), else v2 (64)
    char *_Nullable name;
    int64_t total_size;
    int64_t piece_length;
    int num_pieces;
    int num_files;
    char *_Nullable error;
} haul_torrent_meta;

// Parses a .torrent file: 0 on success, else -1 with `error` said. Metadata over `max_bytes`, or with more than
// `max_files` files, is refused before it is parsed further.
int haul_torrent_parse(const void *_Nonnull bytes, size_t length, int64_t max_bytes, int max_files,
                       haul_torrent_meta *_Nonnull meta);
void haul_torrent_meta_clear(haul_torrent_meta *_Nonnull meta);
// File `index` of a parsed .torrent (as haul_torrent_parse read it): its path as the file says it, size, and
// whether it is a pad file. 0 on success.
int haul_torrent_parse_file(const void *_Nonnull bytes, size_t length, int index, char *_Nullable *_Nonnull path,
                            int64_t *_Nonnull size, int *_Nonnull pad);

typedef struct {
    uint64_t key;
    const char *_Nullable magnet;
    const void *_Nullable torrent;  // a .torrent file's bytes
    size_t torrent_length;
    const void *_Nullable resume;  // resume data saved before (wins over the two above when it holds the info)
    size_t resume_length;
    const char *_Nullable save_path;
    int paused;
    // Ask for no piece (upload mode) until haul_torrent_resume, so that the caller can look at the files (for a
    // magnet, once its metadata arrived) before a byte is written.
    int hold;
    int sequential;
    int64_t upload_limit, download_limit;  // 0 unlimited
    int max_connections;
    const char *_Nullable trackers;  // more tracker URLs, one per line
    const char *_Nullable peers;     // "ip:port" per line, connected to at once
    // The files' first path element (the torrent's name) on disk, when they were given another name.
    const char *_Nullable root;
} haul_torrent_add_params;

// Adds a torrent under `key`: 0, or -1 with `error` said (freed by the caller).
int haul_torrent_add(haul_torrent_session *_Nonnull session, const haul_torrent_add_params *_Nonnull params,
                     char *_Nullable *_Nonnull error);
// Removes it, with its files when `delete_files`; an event says when the files are gone.
void haul_torrent_remove(haul_torrent_session *_Nonnull session, uint64_t key, int delete_files);
void haul_torrent_pause(haul_torrent_session *_Nonnull session, uint64_t key);
void haul_torrent_resume(haul_torrent_session *_Nonnull session, uint64_t key);
// Asks for resume data (answered by an event); with `flush`, the files' caches are written out first.
void haul_torrent_save_resume(haul_torrent_session *_Nonnull session, uint64_t key, int flush);
void haul_torrent_set_limits(haul_torrent_session *_Nonnull session, uint64_t key, int64_t upload_limit,
                             int64_t download_limit);
void haul_torrent_set_sequential(haul_torrent_session *_Nonnull session, uint64_t key, int sequential);
// Priorities per file (0 skip, 1 low, 4 normal, 7 top), `count` of them.
void haul_torrent_set_file_priorities(haul_torrent_session *_Nonnull session, uint64_t key,
                                      const uint8_t *_Nonnull priorities, int count);
// Asks for the first and the last piece of each wanted file first.
void haul_torrent_first_last(haul_torrent_session *_Nonnull session, uint64_t key);
// Asks for the pieces holding [offset, offset+length) of file `index` first.
void haul_torrent_want_range(haul_torrent_session *_Nonnull session, uint64_t key, int index, int64_t offset,
                             int64_t length);
// The verified bytes of file `index` as ranges of its own offsets, first and last byte of each, `capacity` pairs at
// most into `ranges`; the number written.
int haul_torrent_file_have(haul_torrent_session *_Nonnull session, uint64_t key, int index, int64_t *_Nonnull ranges,
                           int capacity);
void haul_torrent_force_recheck(haul_torrent_session *_Nonnull session, uint64_t key);

typedef struct {
    int found;
    int state;  // libtorrent's torrent_status::state_t
    int has_metadata, paused, finished, seeding, errored, moving;
    int64_t total_size;         // of the wanted files
    int64_t total_done;         // verified bytes of the wanted files
    int64_t all_time_upload, all_time_download;
    int64_t download_rate, upload_rate;
    int num_peers, num_seeds, list_seeds, list_peers;
    int64_t seeding_seconds, active_seconds;
    int num_pieces, pieces_done;
    char info_hash[65];
} haul_torrent_status;

void haul_torrent_status_of(haul_torrent_session *_Nonnull session, uint64_t key,
                            haul_torrent_status *_Nonnull status);
// The torrent's name and, when set, its error (both freed by the caller).
char *_Nullable haul_torrent_name(haul_torrent_session *_Nonnull session, uint64_t key);
char *_Nullable haul_torrent_error(haul_torrent_session *_Nonnull session, uint64_t key);
// The .torrent file of a torrent with metadata (for a magnet, once it arrived), freed by the caller.
void *_Nullable haul_torrent_metadata(haul_torrent_session *_Nonnull session, uint64_t key,
                                      size_t *_Nonnull length);

// Files of a torrent with metadata: -1 without. Paths as they are on disk, relative to the save path.
int haul_torrent_file_count(haul_torrent_session *_Nonnull session, uint64_t key);
int haul_torrent_file(haul_torrent_session *_Nonnull session, uint64_t key, int index, char *_Nullable *_Nonnull path,
                      int64_t *_Nonnull size, int *_Nonnull pad);
// Verified bytes per file into `done` (`count` of them); the number written.
int haul_torrent_file_progress(haul_torrent_session *_Nonnull session, uint64_t key, int64_t *_Nonnull done,
                               int count);

enum {
    HAUL_TORRENT_ADDED = 1,
    HAUL_TORRENT_ADD_FAILED,
    HAUL_TORRENT_METADATA,
    HAUL_TORRENT_FINISHED,
    HAUL_TORRENT_ERROR,
    HAUL_TORRENT_RESUME_DATA,
    HAUL_TORRENT_RESUME_FAILED,
    HAUL_TORRENT_REMOVED,
    HAUL_TORRENT_FILES_DELETED,
    HAUL_TORRENT_DELETE_FAILED,
    HAUL_TORRENT_CHECKED,
    HAUL_TORRENT_PAUSED,
    HAUL_TORRENT_RESUMED,
    HAUL_TORRENT_LISTEN_FAILED,
    HAUL_TORRENT_PIECE,
    HAUL_TORRENT_FILE_ERROR,
};

typedef struct {
    int kind;
    uint64_t key;
    int piece;                  // HAUL_TORRENT_PIECE
    char *_Nullable message;    // freed by the caller
    void *_Nullable data;       // resume data (freed by the caller)
    size_t length;
} haul_torrent_event;

// Moves up to `capacity` waiting events into `events`; the number moved. Drains the wake descriptor's bytes
// first is the caller's part.
int haul_torrent_pop(haul_torrent_session *_Nonnull session, haul_torrent_event *_Nonnull events, int capacity);

#ifdef __cplusplus
}
#endif

#endif
