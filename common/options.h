/* options.h — command-line flags with environment-variable fallbacks, and --help.
 *
 * Each binary declares a table of llmr_option; llmr_options_parse fills the targets from, in order of
 * precedence: the command line (--name VALUE or --name=VALUE; bool flags take no value), the
 * environment variable named in the table, then the default. --help prints the table (with each
 * variable and default) and the program's description. */
#ifndef LLMR_OPTIONS_H
#define LLMR_OPTIONS_H

typedef enum { LLMR_OPT_STRING, LLMR_OPT_INT, LLMR_OPT_BOOL } llmr_opt_type;

typedef struct llmr_option {
    const char *name;       /* without dashes: "listen" */
    const char *env;        /* "LLMR_LISTEN", or NULL */
    llmr_opt_type type;
    const char *def;        /* default as text, or NULL (string: NULL stays NULL) */
    const char *help;
    void *target;           /* const char ** | int * | int * (bool: 0/1) */
} llmr_option;

/* Returns 0 to go on, 1 if --help was printed (exit 0), -1 on a bad flag (message printed to stderr, exit 2).
 * String targets point into argv/environ or the table's defaults: never freed. */
int llmr_options_parse(const char *prog, const char *description, llmr_option *opts, int n_opts, int argc, char **argv);

void llmr_options_usage(const char *prog, const char *description, const llmr_option *opts, int n_opts);

#endif
