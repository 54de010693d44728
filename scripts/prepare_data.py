"""Write or check data/bfcl_{train,val,test}.parquet; see `seal.dataset`."""

import sys

from seal.dataset import main

if __name__ == "__main__":
    sys.exit(main())
