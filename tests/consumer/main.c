/* SPDX-License-Identifier: MIT */
/* A C app of the installed libtern, built with plain cc and pkg-config (tests/consumer/run.sh): loads a byte-level
 * model, runs a prompt, prints the most likely next byte and the library's version. Usage: consumer_c MODEL TEXT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

int main(int argc, char** argv) {
  if (argc != 3 || argv[2][0] == '\0') {
    fprintf(stderr, "usage: %s MODEL.tern TEXT\n", argv[0]);
    return 2;
  }
  tern_model* model = NULL;
  if (tern_model_load(argv[1], &model) != TERN_OK) {
    fprintf(stderr, "load: %s\n", tern_last_error());
    return 1;
  }
  tern_session_options options;
  tern_session_options_init(&options);
  options.threads = 1;
  tern_session* session = NULL;
  if (tern_session_create(model, &options, &session) != TERN_OK) {
    fprintf(stderr, "session: %s\n", tern_last_error());
    tern_model_free(model);
    return 1;
  }
  size_t n = strlen(argv[2]);
  int64_t vocab = tern_session_vocab_size(session);
  int32_t* ids = malloc(sizeof(int32_t) * n);
  float* logits = malloc(sizeof(float) * n * (size_t)vocab);
  int rc = 1;
  if (ids && logits) {
    for (size_t i = 0; i < n; ++i) ids[i] = (unsigned char)argv[2][i];
    if (tern_session_forward(session, ids, (int64_t)n, logits) == TERN_OK) {
      const float* last = logits + (n - 1) * (size_t)vocab;
      int64_t best = 0;
      for (int64_t v = 1; v < vocab; ++v)
        if (last[v] > last[best]) best = v;
      printf("libtern %s (header %d.%d.%d): next byte after \"%s\": %lld\n", tern_version(), TERN_VERSION_MAJOR,
             TERN_VERSION_MINOR, TERN_VERSION_PATCH, argv[2], (long long)best);
      rc = 0;
    } else {
      fprintf(stderr, "forward: %s\n", tern_session_last_error(session));
    }
  }
  free(ids);
  free(logits);
  tern_session_free(session);
  tern_model_free(model);
  return rc;
}
